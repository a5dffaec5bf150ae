package gseapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
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

// Handler routes the gateway's paths: every API of the table at its route.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"/api/c/compapi/v2/gse/{api}", "/api/v2/proc/{api}"} {
		mux.HandleFunc("POST "+p, g.serveGSE)
		mux.HandleFunc("POST "+p+"/", g.serveGSE)
	}
	for _, s := range apiTable {
		if s.route == routeDrover {
			serve := g.serveAPI(s.name, droverPrefix+s.name)
			mux.HandleFunc("POST "+droverPath+s.name, serve)
			mux.HandleFunc("POST "+droverPath+s.name+"/", serve)
		}
	}
	// drover's own: rollouts, beside the GSE paths (see rollout.go).
	mux.HandleFunc("POST /api/v2/drover/rollout", g.serveRollout)
	mux.HandleFunc("POST /api/v2/drover/rollout/{action}", g.serveRollout)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"result":true,"code":0,"message":"ok","data":null}`)
	})
	return mux
}

// serveGSE answers an API at the ESB and GSE 2.0 paths, which serve the
// table's APIs routed there; any other name is not found.
func (g *Gateway) serveGSE(w http.ResponseWriter, r *http.Request) {
	api := r.PathValue("api")
	if s, err := lookup(api); err != nil || s.route != routeGSE {
		g.serve(w, r, api, func() (int, Response, string, string) {
			return http.StatusNotFound, Failure(CodeBadRequest, fieldErr("api", "%q is not a known API", api)), "", ""
		})
		return
	}
	g.serveAPI(api, api)(w, r)
}

// serveAPI answers api, logged as logName.
func (g *Gateway) serveAPI(api, logName string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g.serve(w, r, logName, func() (int, Response, string, string) {
			return g.answerWith(r, func(ctx context.Context, body []byte, grant *Grant) (Response, Outcome) {
				return CallAs(ctx, g.Engine, api, body, false, grant)
			})
		})
	}
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
	return httpStatus(outcome), resp, caller.AppCode, operator
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
