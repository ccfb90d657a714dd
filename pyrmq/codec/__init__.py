"""pyrmq.codec"""
