package redisstore

import "strings"

// Every Redis key this package uses is built here. All keys of one queue carry
// the hash tag {<queue>}, so they live in one Redis Cluster slot and every
// script, which only ever touches one queue, is cluster-safe. Queue names
// cannot contain '{' or '}' (queue.ValidateQueueName) and the prefix is
// checked in New, so the queue name is always the key's first hash tag —
// whatever a worker id or job id contains.
//
//	<prefix>:{<queue>}:processing:<worker>
//	    ZSET of the job ids the worker was assigned in the queue, score = the
//	    assignment time in milliseconds. Written by InflightAdd (ZADD, in
//	    inflight_add.lua) right after Postgres assigned the jobs, and by
//	    InflightRemove (ZREM, in inflight_remove.lua) when an attempt ends;
//	    read by InflightList (the reaper) and Counts. O(log n) per job either
//	    way. Lives as long as it has entries; entries of a dead worker stay
//	    until the reaper removes them (doc.go).
//
//	<prefix>:{<queue>}:lock:<job_id>
//	    STRING, the job id, with a TTL of
//	    InflightAddParams.LockTTL. Written by InflightAdd; deleted by
//	    InflightRemove. Expires on its own: it marks a job as held for anyone
//	    reading Redis, never the fence (Postgres is).

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

// inflight is the worker's in-flight set in the queue.
func (k keys) inflight(queueName, workerID string) string {
	return k.queueBase(queueName) + ":processing:" + workerID
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
