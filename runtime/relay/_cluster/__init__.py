"""Sessions hosted in Ray actors, with failover through the rollout (docs/cluster.md)."""
