#!/bin/bash
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]; then echo 1 > /logs/verifier/reward.txt; else echo "hello.txt holds: $(cat /app/hello.txt 2>&1)"; echo 0 > /logs/verifier/reward.txt; fi
