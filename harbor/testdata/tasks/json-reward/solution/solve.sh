#!/bin/bash
touch /app/a /app/b /app/c
