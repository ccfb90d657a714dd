"""pyrmq.broker"""
