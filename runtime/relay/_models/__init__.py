"""Model clients without a network: the scripted model, its script format, the Responses stream
parser and the in-memory HTTP transport.
"""
