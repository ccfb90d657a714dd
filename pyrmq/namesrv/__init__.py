"""pyrmq.namesrv"""
