package codec

import (
	"crypto/subtle"
	"net/http"
	"slices"

	"go.temporal.io/sdk/converter"
)

// ServerOptions configures the codec endpoint.
type ServerOptions struct {
	// Origins may call the endpoint from a browser (the Temporal UI's
	// origin, e.g. http://127.0.0.1:8233); none means no CORS headers.
	Origins []string
	// Token, when set, must arrive as "Authorization: Bearer TOKEN".
	Token string
}

// maxBody bounds one request: the server's own payload limits are far lower.
const maxBody = 64 << 20

// Handler serves POST /encode and /decode (under any prefix, as the
// Temporal UI and `temporal --codec-endpoint` call them) for codec.
func Handler(c converter.PayloadCodec, opts ServerOptions) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && slices.Contains(opts.Origins, origin) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			// A preflight carries no credentials; it only learns the rules.
			w.WriteHeader(http.StatusOK)
			return
		}
		if opts.Token != "" {
			got := r.Header.Get("Authorization")
			if subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+opts.Token)) != 1 {
				http.Error(w, "codec endpoint: missing or wrong bearer token", http.StatusUnauthorized)
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		inner.ServeHTTP(w, r)
	})
}
