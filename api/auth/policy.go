package auth

import (
	"slices"

	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/api/gen/taskqueue/v1/taskqueuev1connect"
)

// Reflection procedures: any authenticated caller may read the API's schema.
const (
	reflectionV1      = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	reflectionV1Alpha = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
)

// anyRole marks procedures every authenticated principal may call.
var anyRole = []Role{RoleProducer, RoleWorker, RoleViewer, RoleAdmin}

var (
	readers   = []Role{RoleViewer, RoleAdmin}
	producers = []Role{RoleProducer, RoleAdmin}
	jobReader = []Role{RoleProducer, RoleViewer, RoleAdmin} // a producer: its own jobs only (the handlers check)
	workers   = []Role{RoleWorker, RoleAdmin}               // a worker: its own worker ids only (the handlers check)
	admins    = []Role{RoleAdmin}
)

// policy is the authorization table: which roles may call each procedure.
// A procedure missing here is refused to everyone but admins (fail closed);
// TestPolicyCoversEveryProcedure keeps it complete.
var policy = map[string][]Role{
	jqv1connect.JobServiceSubmitJobProcedure:       producers,
	jqv1connect.JobServiceSubmitJobsProcedure:      producers,
	jqv1connect.JobServiceGetJobProcedure:          jobReader,
	jqv1connect.JobServiceListJobsProcedure:        jobReader,
	jqv1connect.JobServiceListJobEventsProcedure:   jobReader,
	jqv1connect.JobServiceGetJobResultProcedure:    jobReader,
	jqv1connect.JobServiceWatchJobProcedure:        jobReader,
	jqv1connect.JobServiceWatchEventsProcedure:     jobReader,
	jqv1connect.JobServiceCancelJobProcedure:       producers,
	jqv1connect.JobServiceRetryJobProcedure:        admins,
	jqv1connect.JobServiceDeleteJobProcedure:       admins,
	jqv1connect.QueueServiceCreateQueueProcedure:   admins,
	jqv1connect.QueueServiceDeleteQueueProcedure:   admins,
	jqv1connect.QueueServiceUpdateQueueProcedure:   admins,
	jqv1connect.QueueServicePauseQueueProcedure:    admins,
	jqv1connect.QueueServiceResumeQueueProcedure:   admins,
	jqv1connect.QueueServiceListQueuesProcedure:    readers,
	jqv1connect.QueueServiceGetQueueProcedure:      readers,
	jqv1connect.QueueServiceGetQueueStatsProcedure: readers,

	// Schedules: admins change them, viewers read them.
	jqv1connect.ScheduleServiceCreateScheduleProcedure:  admins,
	jqv1connect.ScheduleServiceUpdateScheduleProcedure:  admins,
	jqv1connect.ScheduleServicePauseScheduleProcedure:   admins,
	jqv1connect.ScheduleServiceResumeScheduleProcedure:  admins,
	jqv1connect.ScheduleServiceTriggerScheduleProcedure: admins,
	jqv1connect.ScheduleServiceDeleteScheduleProcedure:  admins,
	jqv1connect.ScheduleServiceListSchedulesProcedure:   readers,
	jqv1connect.ScheduleServiceGetScheduleProcedure:     readers,

	// Constraints: admins change them, viewers read them, as queues.
	jqv1connect.ConstraintServiceCreateConstraintProcedure: admins,
	jqv1connect.ConstraintServiceDeleteConstraintProcedure: admins,
	jqv1connect.ConstraintServiceListConstraintsProcedure:  readers,
	jqv1connect.ConstraintServiceGetConstraintProcedure:    readers,

	jqv1connect.WorkerServiceRegisterWorkerProcedure:   workers,
	jqv1connect.WorkerServiceHeartbeatProcedure:        workers,
	jqv1connect.WorkerServiceStreamJobsProcedure:       workers,
	jqv1connect.WorkerServiceAckJobsProcedure:          workers,
	jqv1connect.WorkerServiceReportJobsProcedure:       workers,
	jqv1connect.WorkerServiceReportProgressProcedure:   workers,
	jqv1connect.WorkerServiceDeregisterWorkerProcedure: workers,
	jqv1connect.WorkerServiceListWorkersProcedure:      readers,
	jqv1connect.WorkerServiceDrainWorkerProcedure:      admins,
	jqv1connect.WorkerServiceResumeWorkerProcedure:     admins,
	jqv1connect.WorkerServiceShutdownWorkerProcedure:   admins,

	jqv1connect.AdminServiceGetStatusProcedure:        readers,
	jqv1connect.AdminServiceGetVersionProcedure:       anyRole,
	jqv1connect.AdminServiceGetStatsProcedure:         readers,
	jqv1connect.AdminServicePeekQueueProcedure:        readers,
	jqv1connect.AdminServicePurgeDeadLettersProcedure: admins,

	// Seed 003's facade: each RPC with the roles of its jq.v1 counterpart (SubmitJob, GetJob,
	// GetJobResult, CancelJob, ListJobs); the handlers apply the same own-jobs checks.
	taskqueuev1connect.TaskQueuePublicServiceSubmitJobProcedure:    producers,
	taskqueuev1connect.TaskQueuePublicServiceGetJobStatusProcedure: jobReader,
	taskqueuev1connect.TaskQueuePublicServiceGetJobResultProcedure: jobReader,
	taskqueuev1connect.TaskQueuePublicServiceCancelJobProcedure:    producers,
	taskqueuev1connect.TaskQueuePublicServiceListJobsProcedure:     jobReader,

	reflectionV1:      anyRole,
	reflectionV1Alpha: anyRole,
}

// Allowed reports whether principal p may call procedure (its full path,
// "/jq.v1.JobService/SubmitJob").
func Allowed(p *Principal, procedure string) bool {
	if p.IsAdmin() {
		return true
	}
	for _, r := range policy[procedure] {
		if slices.Contains(p.Roles, r) {
			return true
		}
	}
	return false
}

// RolesFor lists the roles that may call procedure (admin always may).
func RolesFor(procedure string) []Role {
	if rs, ok := policy[procedure]; ok {
		return slices.Clone(rs)
	}
	return []Role{RoleAdmin}
}
