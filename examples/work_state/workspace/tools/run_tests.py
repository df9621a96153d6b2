import sys

print("running...")
print("3 failed, 415 " + "passed in 8.31s")
sys.exit(1)
