package oauth

// pagesText holds the consent pages. No script anywhere: the pages work with forms alone, and the
// Content-Security-Policy forbids script.
const pagesText = `
{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.}} · Waypost</title><link rel="stylesheet" href="/authorize/consent.css"><link rel="icon" href="data:,"></head>
<body><main>{{end}}

{{define "foot"}}</main></body></html>{{end}}

{{define "message"}}{{template "head" .Title}}
<h1>{{.Title}}</h1>
<p class="detail">{{.Detail}}</p>
{{template "foot"}}{{end}}

{{define "login"}}{{template "head" "Sign in as the owner"}}
<h1>Sign in as the owner</h1>
<p>An application ({{.ClientID}}) asks to connect to this Waypost server. Only the server's owner can approve
it. Enter the admin secret once for this browser session (it is checked here and never stored in the browser;
the session ends after half an hour).</p>
{{if .Problem}}<p class="problem" role="alert">{{.Problem}}</p>{{end}}
<form method="post" action="/authorize/login">
<input type="hidden" name="{{.Fields.CSRF}}" value="{{.CSRF}}">
<input type="hidden" name="{{.Fields.Continue}}" value="{{.Continue}}">
<label for="secret">Admin secret</label>
<input id="secret" name="{{.Fields.Secret}}" type="password" autocomplete="current-password" required autofocus>
<p class="hint">Find it in <code>&lt;data dir&gt;/admin-secret</code> or your <code>WAYPOST_ADMIN_SECRET</code>.</p>
<button type="submit" id="sign-in">Sign in</button>
</form>
{{template "foot"}}{{end}}

{{define "consent"}}{{template "head" "Authorize an application"}}
<h1>Authorize {{if .ClientName}}“{{.ClientName}}”{{else}}an application{{end}}?</h1>
<section class="client" aria-label="The application">
<dl>
<dt>Application</dt><dd id="client-name">{{if .ClientName}}{{.ClientName}}{{else}}(no name given){{end}} <span class="muted">{{.ClientID}}</span></dd>
{{if .ClientURI}}<dt>Its site</dt><dd>{{.ClientURI}}</dd>{{end}}
<dt>Sends you back to</dt><dd><strong id="redirect-host">{{.RedirectHost}}</strong><br><span class="muted" id="redirect-uri">{{.RedirectURI}}</span>
{{if .Loopback}}<br><span class="note">a program on this computer</span>{{end}}</dd>
<dt>Asks for</dt><dd>{{range .Requested}}<code>{{.}}</code> {{else}}no particular scope{{end}}</dd>
</dl>
<p class="note">Approve only if you started this connection yourself. The application will act as the actor you
choose below, with the scopes you tick, until you revoke it (<code>waypost admin oauth revoke</code>).</p>
</section>
{{if .Problem}}<p class="problem" role="alert" id="problem">{{.Problem}}</p>{{end}}
{{if not .Spaces}}
<p class="problem">This server has no space yet. Create one first (<code>waypost admin space create</code>), then start
again from the application.</p>
<form method="post" action="/authorize">
{{range .Params}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">{{end}}
<input type="hidden" name="{{.Fields.CSRF}}" value="{{.CSRF}}">
<button type="submit" name="{{.Fields.Decision}}" value="deny" id="deny">Deny</button>
</form>
{{else}}
{{if gt (len .Spaces) 1}}
<form method="get" action="/authorize" class="space">
{{range .Params}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">{{end}}
<label for="space-pick">Space</label>
<select id="space-pick" name="{{.Fields.Space}}">{{range .Spaces}}<option value="{{.SpaceID}}"{{if eq .SpaceID $.Space}} selected{{end}}>{{if .DisplayName}}{{.DisplayName}} ({{.SpaceID}}){{else}}{{.SpaceID}}{{end}}</option>{{end}}</select>
<button type="submit" id="switch-space">Show this space</button>
</form>
{{end}}
<form method="post" action="/authorize" class="consent">
{{range .Params}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">{{end}}
<input type="hidden" name="{{.Fields.CSRF}}" value="{{.CSRF}}">
<input type="hidden" name="{{.Fields.Space}}" value="{{.Space}}">
<p>Space: <strong id="space">{{.Space}}</strong></p>
<label for="actor">Act as</label>
<select id="actor" name="{{.Fields.Actor}}">
<option value="{{.NewOption}}"{{if eq .ActorDefault .NewOption}} selected{{end}}>A new actor (named below)</option>
{{range .Actors}}<option value="{{.ActorID}}"{{if eq .ActorID $.ActorDefault}} selected{{end}}>{{if .DisplayName}}{{.DisplayName}} ({{.ActorID}}){{else}}{{.ActorID}}{{end}}</option>{{end}}
</select>
<label for="actor-name">Name of a new actor</label>
<input id="actor-name" name="{{.Fields.ActorName}}" maxlength="100" value="{{.ActorNameHint}}">
<label for="consumer">Reads the inbox as</label>
<select id="consumer" name="{{.Fields.Consumer}}">
<option value="{{.NewOption}}" selected>A new inbox consumer of that actor</option>
{{range .Consumers}}<option value="{{.ConsumerID}}">{{.ConsumerID}} (of {{.ActorID}}, {{.View}})</option>{{end}}
<option value="">No consumer (cannot read an inbox)</option>
</select>
<fieldset><legend>Scopes</legend>
{{range .Scopes}}<label class="check"><input type="checkbox" name="{{$.Fields.Scope}}" value="{{.Name}}"{{if .Checked}} checked{{end}}> <code>{{.Name}}</code></label>{{end}}
</fieldset>
<div class="buttons">
<button type="submit" name="{{.Fields.Decision}}" value="approve" id="approve" class="primary">Approve</button>
<button type="submit" name="{{.Fields.Decision}}" value="deny" id="deny">Deny</button>
</div>
</form>
{{end}}
{{template "foot"}}{{end}}
`
