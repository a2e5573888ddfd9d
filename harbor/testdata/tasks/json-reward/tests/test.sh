#!/bin/bash
n=0; for f in a b c; do test -f /app/$f && n=$((n+1)); done; printf "{\"reward\": %s, \"files\": %d}\n" "$([ $n = 3 ] && echo 1.0 || echo 0.0)" $n > /logs/verifier/reward.json
