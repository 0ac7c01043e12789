package admin

import "strings"

// Commands whose behaviour arrives with later issues: they are part of the
// grammar (and of --help) now, and say plainly that they cannot run yet.

func (re *runEnv) notYet() error {
	name := re.command
	var words []string
	for _, w := range strings.Fields(name) {
		if strings.HasPrefix(w, "<") {
			break
		}
		words = append(words, w)
	}
	return notImplemented(strings.Join(words, " "))
}

// Run is not implemented yet.
func (c *JobSubmitCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *JobStatusCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *JobIDCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *JobListCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *QueueListCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *QueueCreateCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *QueueDeleteCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *QueueNameCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *WorkerListCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *WorkerIDCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *StatsCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *PeekCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *PurgeDLQCmd) Run(re *runEnv) error { return re.notYet() }

// Run is not implemented yet.
func (c *EventsTailCmd) Run(re *runEnv) error { return re.notYet() }
