package docker_test

import "errors"

var errorsIs = errors.Is
