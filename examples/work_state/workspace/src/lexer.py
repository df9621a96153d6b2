import re

TOKEN = re.compile(r"\s*(\d+|\S)")


def tokens(text):
    return TOKEN.findall(text)
