package gseapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"
)

// App is a caller allowed to use the HTTP API: its bk_app_code and secret,
// and the namespaces it may touch (none listed: all).
type App struct {
	Code       string
	Secret     string
	Namespaces []string
}

// Gateway serves the GSE APIs over HTTP at the BlueKing ESB paths
// (POST /api/c/compapi/v2/gse/<api_name>/) and the GSE 2.0 gateway paths
// (POST /api/v2/proc/<api_name>), each with and without the trailing slash
// (callers send both), with GET /healthz. Tenant headers (X-Bk-Tenant-Id)
// are accepted and ignored: drover has one tenant.
type Gateway struct {
	Engine Engine
	Apps   []App
	Logger *slog.Logger
	// Timeout bounds one request; synchronous APIs answer 115 for hosts
	// still running then.
	Timeout time.Duration
}

// Handler routes the gateway's paths.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/c/compapi/v2/gse/{api}/", g.serveAPI)
	mux.HandleFunc("POST /api/c/compapi/v2/gse/{api}", g.serveAPI)
	mux.HandleFunc("POST /api/v2/proc/{api}", g.serveAPI)
	mux.HandleFunc("POST /api/v2/proc/{api}/", g.serveAPI)
	// drover's own: rollouts, beside the GSE paths (see rollout.go).
	mux.HandleFunc("POST /api/v2/drover/rollout", g.serveRollout)
	mux.HandleFunc("POST /api/v2/drover/rollout/{action}", g.serveRollout)
	mux.HandleFunc("POST "+CancelTaskPath, g.serveCancel)
	mux.HandleFunc("POST "+CancelTaskPath+"/", g.serveCancel)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"result":true,"code":0,"message":"ok","data":null}`)
	})
	return mux
}

func (g *Gateway) serveAPI(w http.ResponseWriter, r *http.Request) {
	api := r.PathValue("api")
	g.serve(w, r, api, func() (int, Response, string, string) { return g.answer(r, api) })
}

// serve writes an answer and logs the call.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, api string, answer func() (int, Response, string, string)) {
	began := time.Now()
	status, resp, app, operator := answer()
	writeJSON(w, status, resp)
	if g.Logger != nil {
		// Never the secret or the token: who, what, and how it went.
		g.Logger.Info("api", "method", r.Method, "path", r.URL.Path, "api", api, "app", app, "operator", operator,
			"status", status, "code", resp.Code, "ms", time.Since(began).Milliseconds())
	}
}

func (g *Gateway) answer(r *http.Request, api string) (int, Response, string, string) {
	if !slices.Contains(APIs, api) && !slices.Contains(FileAPIs, api) {
		return http.StatusNotFound, Failure(CodeBadRequest, fieldErr("api", "%q is not a known API", api)), "", ""
	}
	return g.answerWith(r, func(ctx context.Context, body []byte, grant *Grant) (Response, Outcome) {
		return CallAs(ctx, g.Engine, api, body, false, grant)
	})
}

// answerWith reads and authenticates a call, then answers it with call.
func (g *Gateway) answerWith(r *http.Request, call func(context.Context, []byte, *Grant) (Response, Outcome)) (int, Response, string, string) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, Failure(CodeBadRequest, fieldErr("(body)", "is larger than %d bytes", MaxBodyBytes)), "", ""
		}
		return http.StatusBadRequest, Failure(CodeBadRequest, fieldErr("(body)", "could not be read: %v", err)), "", ""
	}
	caller := callerOf(r, body)
	operator := caller.Username
	app, ok := g.authenticated(caller)
	if !ok {
		return http.StatusUnauthorized, Failure(CodeUnauthorized, errors.New("bk_app_code or bk_app_secret refused")), caller.AppCode, operator
	}
	ctx := r.Context()
	if g.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.Timeout)
		defer cancel()
	}
	resp, outcome := call(ctx, body, &Grant{Caller: caller, App: app.Code, Namespaces: app.Namespaces})
	status := http.StatusOK
	switch outcome {
	case OutcomeBadRequest:
		status = http.StatusBadRequest
	case OutcomeUnavailable:
		status = http.StatusServiceUnavailable
	case OutcomeNotFound:
		status = http.StatusNotFound
	case OutcomeForbidden:
		status = http.StatusForbidden
	}
	return status, resp, caller.AppCode, operator
}

// callerOf reads the caller from the body's common fields, or from the
// BlueKing API gateway's X-Bkapi-Authorization header.
func callerOf(r *http.Request, body []byte) Caller {
	var c Caller
	_ = json.Unmarshal(body, &c)
	if h := r.Header.Get("X-Bkapi-Authorization"); h != "" {
		var hc Caller
		if json.Unmarshal([]byte(h), &hc) == nil {
			if hc.AppCode != "" {
				c.AppCode, c.AppSecret = hc.AppCode, hc.AppSecret
			}
			if hc.Username != "" {
				c.Username = hc.Username
			}
		}
	}
	return c
}

// authenticated compares the secret in constant time; an unknown app code
// costs the same comparison as a known one. It returns the matching app.
func (g *Gateway) authenticated(c Caller) (App, bool) {
	var found App
	ok := false
	for _, app := range g.Apps {
		codeOK := subtle.ConstantTimeCompare([]byte(app.Code), []byte(c.AppCode)) == 1
		secretOK := subtle.ConstantTimeCompare([]byte(app.Secret), []byte(c.AppSecret)) == 1
		if codeOK && secretOK && app.Secret != "" && !ok {
			found, ok = app, true
		}
	}
	return found, ok
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
