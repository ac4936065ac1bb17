package kafkanet

import (
	"context"
	"fmt"

	"github.com/turbokafka/turbo/config"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Franz returns the options that secure a franz-go client as Apply secures
// a sarama configuration, from the same kafka section: the CA bundle is read
// now (call it for each new client), the client certificate at every
// connection, and the PLAIN or SCRAM password and the OAuth token at every
// authentication — franz-go asks for the credentials each time it
// authenticates a connection, so a rotated password_file needs no restart
// on this side either.
func (n *Net) Franz() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if n.k.TLS.Enabled {
		tc, err := n.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	mech, err := n.franzSASL()
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// franzSASL returns the SASL mechanism of the settings, nil without SASL.
func (n *Net) franzSASL() (sasl.Mechanism, error) {
	s := n.k.SASL
	password := func() (string, error) {
		pw, err := s.PasswordValue()
		if err != nil {
			return "", fmt.Errorf("kafka.sasl.password_file: %w", err)
		}
		return pw, nil
	}
	switch s.Mechanism {
	case config.SASLNone:
		return nil, nil
	case config.SASLPlain:
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			pw, err := password()
			return plain.Auth{User: s.Username, Pass: pw}, err
		}), nil
	case config.SASLScramSHA256, config.SASLScramSHA512:
		auth := func(context.Context) (scram.Auth, error) {
			pw, err := password()
			return scram.Auth{User: s.Username, Pass: pw}, err
		}
		if s.Mechanism == config.SASLScramSHA256 {
			return scram.Sha256(auth), nil
		}
		return scram.Sha512(auth), nil
	case config.SASLOAuthBearer:
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := n.tokens.Token()
			if err != nil {
				return oauth.Auth{}, err
			}
			return oauth.Auth{Token: tok.Token, Extensions: tok.Extensions}, nil
		}), nil
	default:
		return nil, fmt.Errorf("kafka.sasl.mechanism: unknown mechanism %q", s.Mechanism)
	}
}
