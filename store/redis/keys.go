package redis

import "strings"

// Every Redis key this package uses is built here. All keys of one queue carry
// the hash tag {<queue>}, so they live in one Redis Cluster slot and every
// script, which only ever touches one queue, is cluster-safe. Queue names
// cannot contain '{' or '}' (queue.ValidateQueueName) and the prefix is
// checked in New, so the queue name is always the key's first hash tag —
// whatever a worker id or job id contains.
//
//	<prefix>:{<queue>}:ready
//	    ZSET, member = job id, score = readyScore(priority, created_at).
//	    Written by ReadyPush (ZADD, in ready_push.lua) and Claim (ZPOPMIN, in
//	    claim.lua); read by Claim and ReadyLen. Lives as long as it has members
//	    (Redis deletes an empty sorted set); refilled from Postgres by the
//	    scheduler after a Redis loss.
//
//	<prefix>:{<queue>}:inflight:<worker>
//	    LIST of job ids in claim order (RPUSH). Written by Claim (claim.lua) and
//	    InflightRemove (LREM, or one rewrite for a batch, in
//	    inflight_remove.lua); read by InflightList (the reaper). Lives as long as it has entries; entries of a dead worker stay
//	    until the reaper removes them (doc.go).
//
//	<prefix>:{<queue>}:lock:<job_id>
//	    STRING "1" with a TTL of ReadyPushParams.LockTTL (SET NX PX). Written
//	    by ReadyPush; deleted by InflightRemove; read by nobody but ReadyPush's
//	    NX. Expires on its own: it is a hint that saves duplicate work, never
//	    the fence (Postgres is).

// DefaultKeyPrefix is used when Config.KeyPrefix is empty.
const DefaultKeyPrefix = "jq"

// keys builds the key names under one prefix.
type keys struct {
	prefix string
}

// queueBase is "<prefix>:{<queue>}", the common, hash-tagged head of a queue's keys.
func (k keys) queueBase(queueName string) string {
	var sb strings.Builder
	sb.Grow(len(k.prefix) + len(queueName) + 3)
	sb.WriteString(k.prefix)
	sb.WriteString(":{")
	sb.WriteString(queueName)
	sb.WriteByte('}')
	return sb.String()
}

// ready is the queue's ready set.
func (k keys) ready(queueName string) string {
	return k.queueBase(queueName) + ":ready"
}

// inflight is the worker's in-flight list in the queue.
func (k keys) inflight(queueName, workerID string) string {
	return k.queueBase(queueName) + ":inflight:" + workerID
}

// lock is the dispatch lock of one job of the queue.
func (k keys) lock(queueName, jobID string) string {
	return k.queueBase(queueName) + ":lock:" + jobID
}

// locks appends the lock keys of ids to dst.
func (k keys) locks(dst []string, queueName string, ids []string) []string {
	base := k.lock(queueName, "")
	for _, id := range ids {
		dst = append(dst, base+id)
	}
	return dst
}
