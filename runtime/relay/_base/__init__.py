"""The ground floor: values, configuration, errors, the protocol and its codec, the model
interface, token estimates. Imports nothing else of relay.
"""
