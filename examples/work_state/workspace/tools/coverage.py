import sys

print("running...")
print("coverage: 87.4" + "% of 2913 lines")
sys.exit(2)
