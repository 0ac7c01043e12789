package config

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/schedule"
)

// Schedule is one periodic job declared in the configuration file (schedules:, docs/schedules.md).
// Every server reconciles the declared list at its start: declared schedules are created or
// updated, config-owned ones no longer declared are deleted; the API does not edit them. The env
// override JQ_SCHEDULES takes the whole list as JSON.
type Schedule struct {
	Name       string `koanf:"name" json:"name" yaml:"name"`
	Cron       string `koanf:"cron" json:"cron" yaml:"cron"`
	TimeZone   string `koanf:"time_zone" json:"time_zone,omitempty" yaml:"time_zone,omitempty"`
	Missed     string `koanf:"missed" json:"missed,omitempty" yaml:"missed,omitempty"` // skip (default) | catch_up
	CatchUpMax int    `koanf:"catch_up_max" json:"catch_up_max,omitempty" yaml:"catch_up_max,omitempty"`
	Queue      string `koanf:"queue" json:"queue" yaml:"queue"`
	Type       string `koanf:"type" json:"type" yaml:"type"`
	Payload    string `koanf:"payload" json:"payload,omitempty" yaml:"payload,omitempty"` // a mapping is stored as its JSON
	Priority   int    `koanf:"priority" json:"priority,omitempty" yaml:"priority,omitempty"`
	MaxRetries *int   `koanf:"max_retries" json:"max_retries,omitempty" yaml:"max_retries,omitempty"`
	TimeoutS   int    `koanf:"timeout_s" json:"timeout_s,omitempty" yaml:"timeout_s,omitempty"`
	// TTLS is each job's time to live while PENDING, in seconds (0: the queue's).
	TTLS       int               `koanf:"ttl_s" json:"ttl_s,omitempty" yaml:"ttl_s,omitempty"`
	KeepResult bool              `koanf:"keep_result" json:"keep_result,omitempty" yaml:"keep_result,omitempty"`
	Labels     map[string]string `koanf:"labels" json:"labels,omitempty" yaml:"labels,omitempty"`
	// Overlap is what a fire does while the previous fire's job has not ended.
	Overlap string `koanf:"overlap" json:"overlap,omitempty" yaml:"overlap,omitempty"` // skip (default) | buffer_one | allow_all
}

// Timeout is the execution limit of each job (0: the default).
func (s Schedule) Timeout() time.Duration { return seconds(s.TimeoutS) }

// TTL is each job's time to live while PENDING (0: the queue's).
func (s Schedule) TTL() time.Duration { return seconds(s.TTLS) }

// maxScheduleTTLS bounds ttl_s: a year, as a job's ttl.
const maxScheduleTTLS = 366 * 24 * 3600

// coerceStructList decodes a list of mappings (the file) or its JSON text (an env variable) into
// the list type t, refusing unknown keys.
func coerceStructList(t reflect.Type, v any) (any, string) {
	var text []byte
	switch x := v.(type) {
	case string:
		// The same list as JSON text: a payload given as a mapping is taken as the file takes it.
		var list []any
		if err := json.Unmarshal([]byte(x), &list); err == nil {
			return coerceStructList(t, list)
		}
		text = []byte(x)
	case []any:
		items := make([]any, len(x))
		for i, e := range x {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, "expected a list of mappings, got a list containing " + describe(e)
			}
			if p, ok := m["payload"]; ok {
				if _, isText := p.(string); !isText && p != nil {
					b, err := json.Marshal(p)
					if err != nil {
						return nil, "item " + strconv.Itoa(i) + ": payload: " + err.Error()
					}
					m["payload"] = string(b)
				}
			}
			items[i] = m
		}
		var err error
		if text, err = json.Marshal(items); err != nil {
			return nil, err.Error()
		}
	default:
		return nil, "expected a list of mappings, got " + describe(v)
	}
	out := reflect.New(t)
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out.Interface()); err != nil {
		return nil, "expected a list of mappings with known keys: " + strings.TrimPrefix(err.Error(), "json: ")
	}
	return out.Elem().Interface(), ""
}

// validateSchedules checks every declared schedule as a server will: names unique, spec and zone
// parsed, the template within the job rules.
func (c *Config) validateSchedules(p *checker) {
	seen := map[string]bool{}
	for i, s := range c.Schedules {
		key := "schedules[" + strconv.Itoa(i) + "]"
		if err := queue.ValidateScheduleName(s.Name); err != nil {
			p.add(key+".name", "%s", strings.TrimPrefix(err.Error(), queue.ErrInvalidArgument.Error()+": "))
		} else if seen[s.Name] {
			p.add(key+".name", "schedule %q is declared twice", s.Name)
		}
		seen[s.Name] = true
		if _, err := schedule.Parse(s.Cron, s.TimeZone); err != nil {
			p.add(key+".cron", "%s", strings.TrimPrefix(err.Error(), queue.ErrInvalidArgument.Error()+": "))
		}
		missed := queue.MissedPolicy(s.Missed)
		if s.Missed == "" {
			missed = queue.MissedSkip
		}
		if _, err := queue.ValidateMissed(missed, s.CatchUpMax); err != nil {
			p.add(key+".missed", "%s", strings.TrimPrefix(err.Error(), queue.ErrInvalidArgument.Error()+": "))
		}
		if !queueNameRE.MatchString(s.Queue) {
			p.add(key+".queue", "must match %s, got %q", queueNameRE, s.Queue)
		}
		if s.Type == "" {
			p.add(key+".type", "required: the handler that runs the jobs")
		}
		if s.Priority < queue.MinPriority || s.Priority > queue.MaxPriority {
			p.add(key+".priority", "must be %d to %d, got %d", queue.MinPriority, queue.MaxPriority, s.Priority)
		}
		if s.MaxRetries != nil && (*s.MaxRetries < 0 || *s.MaxRetries > 100) {
			p.add(key+".max_retries", "must be 0 to 100, got %d", *s.MaxRetries)
		}
		if s.TimeoutS < 0 || s.TimeoutS > 86400 {
			p.add(key+".timeout_s", "must be 0 (30s) to 86400, got %d", s.TimeoutS)
		}
		if s.TTLS < 0 || s.TTLS > maxScheduleTTLS {
			p.add(key+".ttl_s", "must be 0 (the queue's) to %d, got %d", maxScheduleTTLS, s.TTLS)
		}
		if _, err := queue.ValidateOverlap(queue.OverlapPolicy(s.Overlap)); err != nil {
			p.add(key+".overlap", "%s", strings.TrimPrefix(err.Error(), queue.ErrInvalidArgument.Error()+": "))
		}
		// As the API refuses a larger payload for a schedule it is given: every fire would submit it.
		if c.Server.MaxPayloadBytes > 0 && len(s.Payload) > c.Server.MaxPayloadBytes {
			p.add(key+".payload", "%d bytes: at most server.max_payload_bytes (%d)", len(s.Payload), c.Server.MaxPayloadBytes)
		}
	}
}
