#!/bin/bash
echo 41 > answer.txt
