package apiserver

import (
	"context"
	"fmt"
	"slices"

	"github.com/jq-dev/jq/api/auth"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// ownJobsOnly is the principal a caller's job reads are limited to: a producer sees the jobs
// it submitted, unless it is also a viewer (or an admin, or authentication is off).
func ownJobsOnly(ctx context.Context) (string, bool) {
	p, restricted := auth.Restricted(ctx)
	if !restricted || slices.Contains(p.Roles, auth.RoleViewer) {
		return "", false
	}
	return p.Name, true
}

// ownJob refuses a job another principal submitted: for reads unless the caller may see every
// job, for changes (cancel, consuming a result) unless it is an admin.
func (s *jobService) ownJob(ctx context.Context, id string, change bool) error {
	p, restricted := auth.Restricted(ctx)
	if !restricted {
		return nil
	}
	if _, only := ownJobsOnly(ctx); !only && !change {
		return nil
	}
	j, err := s.store.JobGet(ctx, id)
	if err != nil {
		return err
	}
	return jobOwnedBy(j, p.Name)
}

func jobOwnedBy(j *queue.Job, principal string) error {
	if j.Principal != principal {
		return fmt.Errorf("%w: job %s was submitted by another principal", queue.ErrPermissionDenied, j.ID)
	}
	return nil
}

// stampSubmitter records the submitting principal and applies its queue list.
func stampSubmitter(ctx context.Context, p *store.JobInsertParams) error {
	p.Principal = auth.Owner(ctx)
	if pr, restricted := auth.Restricted(ctx); restricted && !pr.AllowsQueue(p.Queue) {
		return fmt.Errorf("%w: %s may not submit to queue %q", queue.ErrPermissionDenied, pr.Name, p.Queue)
	}
	return nil
}
