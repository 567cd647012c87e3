"""push"""
