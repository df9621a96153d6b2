class Node:
    def __init__(self, kind, children=()):
        self.kind = kind
        self.children = list(children)
