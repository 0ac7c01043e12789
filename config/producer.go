package config

import (
	"strconv"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
)

// Producer is the directory scanner of --role=producer (seed 004; docs/producer.md): one job per
// file version, submitted through the API like any client's.
type Producer struct {
	// ServerAddr is the jq server's API (several replicas comma-separated), as worker.server_addr.
	ServerAddr string `koanf:"server_addr"`
	// ScanDir is the directory scanned recursively. Required to run the producer; in --role=all
	// the producer runs only when it is set.
	ScanDir string `koanf:"scan_dir"`
	// IncludeGlobs and ExcludeGlobs select files by their path relative to scan_dir, with forward
	// slashes; ** matches any number of directories. A file is taken when it matches an include
	// glob and no exclude glob; a directory matching an exclude glob is not entered.
	IncludeGlobs []string `koanf:"include_globs"`
	ExcludeGlobs []string `koanf:"exclude_globs"`
	// HighPriorityExts are the extensions (".pdf"; case-insensitive) whose files get HighPriority;
	// every other file gets DefaultPriority (seed 004's high and low, on jq's 0–9 scale).
	HighPriorityExts []string `koanf:"high_priority_exts"`
	HighPriority     int      `koanf:"high_priority"`
	DefaultPriority  int      `koanf:"default_priority"`
	// Queue and JobType of the jobs (the queue must exist).
	Queue   string `koanf:"queue"`
	JobType string `koanf:"job_type"`
	// RateLimitPerSec bounds the submissions of every producer sharing RateLimitKey together, per
	// second (0: unlimited). The limit lives in Redis (redis.*); a producer that cannot reach
	// Redis limits itself alone.
	RateLimitPerSec float64 `koanf:"rate_limit_per_sec"`
	RateLimitKey    string  `koanf:"rate_limit_key"`
	// ScanIntervalS is the pause between two scans in watch mode.
	ScanIntervalS int `koanf:"scan_interval_s"`
	// Once scans once, submits, and exits (0 when every file was handled).
	Once bool `koanf:"once"`
	// KeepResult asks the server to keep each job's result (the file handler's path, size,
	// SHA-256 and MIME type) until fetched or the queue's result retention passes.
	KeepResult bool `koanf:"keep_result"`
	// HashContent adds each file's SHA-256 to its idempotency key (reads every file once per scan).
	HashContent bool `koanf:"hash_content"`
	// BatchSize is the most jobs one SubmitJobs call carries (1..1000).
	BatchSize int `koanf:"batch_size"`
	// LogEvery is how many files a progress log line stands for when stderr is not a terminal.
	LogEvery int `koanf:"log_every"`
	// MetricsPort serves /metrics and /healthz in watch mode (0: not served), on BindHost.
	MetricsPort int       `koanf:"metrics_port"`
	BindHost    string    `koanf:"bind_host"`
	TLS         WorkerTLS `koanf:"tls"`
}

// ScanInterval is scan_interval_s as a duration.
func (p Producer) ScanInterval() time.Duration { return time.Duration(p.ScanIntervalS) * time.Second }

func defaultProducer() Producer {
	return Producer{
		ServerAddr:       "localhost:50051",
		IncludeGlobs:     []string{"**/*"},
		ExcludeGlobs:     []string{"**/*.tmp", "**/.DS_Store"},
		HighPriorityExts: []string{".pdf", ".docx", ".xlsx", ".zip"},
		HighPriority:     7,
		DefaultPriority:  0,
		Queue:            "default",
		JobType:          "file",
		KeepResult:       true,
		RateLimitPerSec:  100,
		RateLimitKey:     "producer:rate_limit",
		ScanIntervalS:    10,
		BatchSize:        100,
		LogEvery:         1000,
		MetricsPort:      9092,
	}
}

func (c *Config) validateProducer(p *checker) {
	pr := c.Producer
	for _, a := range strings.Split(pr.ServerAddr, ",") {
		p.hostPort("producer.server_addr", strings.TrimSpace(a))
	}
	if len(pr.IncludeGlobs) == 0 {
		p.add("producer.include_globs", "must list at least one glob (\"**/*\" takes every file)")
	}
	for name, globs := range map[string][]string{"producer.include_globs": pr.IncludeGlobs, "producer.exclude_globs": pr.ExcludeGlobs} {
		for i, g := range globs {
			if !doublestar.ValidatePattern(g) {
				p.add(name+"["+strconv.Itoa(i)+"]", "%q is not a valid glob", g)
			}
		}
	}
	p.between("producer.high_priority", pr.HighPriority, 0, 9)
	p.between("producer.default_priority", pr.DefaultPriority, 0, 9)
	if !queueNameRE.MatchString(pr.Queue) {
		p.add("producer.queue", "%q is not a valid queue name (want %s)", pr.Queue, queueNameRE)
	}
	if strings.TrimSpace(pr.JobType) == "" {
		p.add("producer.job_type", "must not be empty")
	}
	if pr.RateLimitPerSec < 0 {
		p.add("producer.rate_limit_per_sec", "must be 0 (unlimited) or more, got %v", pr.RateLimitPerSec)
	}
	if pr.RateLimitPerSec > 0 {
		p.required("producer.rate_limit_key", pr.RateLimitKey, "when producer.rate_limit_per_sec is set")
	}
	p.between("producer.scan_interval_s", pr.ScanIntervalS, 1, maxTimeoutS)
	p.between("producer.batch_size", pr.BatchSize, 1, 1000)
	p.positive("producer.log_every", pr.LogEvery)
	if pr.MetricsPort != 0 {
		p.port("producer.metrics_port", pr.MetricsPort)
	}
	if (pr.TLS.CertPath == "") != (pr.TLS.KeyPath == "") {
		p.add("producer.tls", "cert_path and key_path must be set together")
	}
}
