import sys

print("running...")
print("typecheck: 7 er" + "rors in 3 files")
sys.exit(1)
