// Package netns listens inside another network namespace: a sandbox
// driver serves the model gateway on a sandbox's own loopback this way, a
// namespace where no other address of the host exists.
package netns
