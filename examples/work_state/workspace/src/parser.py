from .lexer import tokens


def parse(text):
    return list(tokens(text))
