#!/bin/sh
# Run op scripts as relay sessions through the Ray Jobs API of a running cluster (the head's
# dashboard port). The scripts and a relay config go with the job (runtime_env working_dir):
# the job runs where Ray puts it, in a copy of that directory. The sessions' working directory
# and their rollouts are on the shared volume every node mounts, so any host can run them.
# Needs `ray[default]` where this runs.
#
#   deploy/submit-job.sh http://ray-head:8265 ./scripts
#
# with ./scripts holding the op scripts (*.jsonl) and relay.toml, for example:
#   cwd = "/shared/relay/work"
set -eu
address=${1:?the Ray dashboard address, as http://HOST:8265}
scripts=${2:?a directory of op scripts and relay.toml}
# The glob is quoted here: it is the job's shell, in the copy of the directory, that expands it.
ray job submit \
    --address "$address" \
    --submission-id "relay-$(date +%Y%m%d-%H%M%S)" \
    --runtime-env-json '{"working_dir": "'"$scripts"'", "env_vars": {"RAY_USAGE_STATS_ENABLED": "0"}}' \
    -- relay cluster run './*.jsonl' --namespace relay --config relay.toml \
       --rollout-dir /shared/relay/sessions --out /shared/relay/events
