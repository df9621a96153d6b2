# Third-party copy, do not edit.
VERSION = "2.7.3"
