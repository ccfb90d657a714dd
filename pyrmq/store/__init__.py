"""pyrmq.store"""
