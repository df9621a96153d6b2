from src.lexer import tokens


def test_spaces():
    assert tokens(" 7 ") == ["7"]
