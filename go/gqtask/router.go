package gqtask

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/mcmathja/curlyq"
)

// ErrUnknownTask is returned (wrapped, with the name) for a task no handler serves.
// curlyq retries the job with its backoff: a newer consumer of a rolling deploy may know it.
var ErrUnknownTask = errors.New("gqtask: unknown task")

// Call is what a handler gets: the decoded task and the curlyq job that carried it.
type Call struct {
	*Task
	Job curlyq.Job
}

// Handler serves one task. An error fails this attempt: curlyq retries the job.
type Handler func(ctx context.Context, call Call) error

// Router sends each job to the handler registered for its task's name.
// Its Serve method is a curlyq.HandlerFunc: consumer.Consume(router.Serve).
type Router struct {
	mu       sync.RWMutex
	handlers map[string]Handler
}

// NewRouter returns an empty router.
func NewRouter() *Router {
	return &Router{handlers: map[string]Handler{}}
}

// Register serves the task called name with h (replacing an earlier handler of name).
func (r *Router) Register(name string, h Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers[name] = h
}

// Serve decodes the job's envelope and runs its task's handler. The task's Timeout, when
// set, bounds ctx. A job that is not an envelope, or whose task is unknown, returns an
// error, so that curlyq retries it (and in the end kills it): nothing is lost unrun.
func (r *Router) Serve(ctx context.Context, job curlyq.Job) error {
	task, err := Decode(job.Data)
	if err != nil {
		return fmt.Errorf("job %s: %w", job.ID, err)
	}
	r.mu.RLock()
	handler, ok := r.handlers[task.Name]
	r.mu.RUnlock()
	if !ok {
		return fmt.Errorf("job %s: %w %s", job.ID, ErrUnknownTask, task.Name)
	}
	if task.Opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, task.Opts.Timeout)
		defer cancel()
	}
	return handler(ctx, Call{Task: task, Job: job})
}
