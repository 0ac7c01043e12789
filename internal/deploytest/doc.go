// Package deploytest checks jq's deployment artefacts without a container runtime: the image
// (Dockerfile, built with buildah and inspected, never run), compose.yaml (loaded with
// compose-go) and the Helm chart deploy/helm/jq (helm lint and helm template, the rendered
// manifests parsed) — and the first day: scripts/fresh-clone.sh, timed from a clone to the first
// job DONE (TestFreshClone), with scripts/services.sh creating the database it is pointed at
// (TestServicesCreatesMissingDatabase). It has no code of its own. The compose, Helm and fresh-clone tests run
// in the normal suite; the image test only with JQ_TEST_IMAGE=1, which
// `go tool -modfile=tools/go.mod task deploy:check` sets.
package deploytest
