// Package docs runs the shell blocks of README.md and docs/*.md against the built jq binary, each
// page in a private environment, so that the documentation's commands keep working as written.
package docs
