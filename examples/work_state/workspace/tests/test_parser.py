from src.parser import parse


def test_numbers():
    assert parse("1 + 22") == ["1", "+", "22"]
