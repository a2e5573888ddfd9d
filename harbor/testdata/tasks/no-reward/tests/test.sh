#!/bin/bash
echo "checked /app/done, but forgot to write the reward"; test -f /app/done
