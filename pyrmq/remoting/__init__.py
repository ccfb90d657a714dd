"""pyrmq.remoting"""
