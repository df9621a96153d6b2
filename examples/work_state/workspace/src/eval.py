def evaluate(node):
    raise NotImplementedError
