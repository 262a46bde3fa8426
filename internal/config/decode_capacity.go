package config

import "github.com/hashicorp/hcl/v2"

// capacity decodes the policy's capacity block: the capacity gate of admission
// (package capacity).
func (d *decoder) capacity(body hcl.Body) {
	s := scope{"capacity", "capacity"}
	content := d.content(body, &hcl.BodySchema{Attributes: attrSchema("enabled", "headroom")})
	if content == nil {
		return
	}
	a, c := content.Attributes, &d.c.Capacity
	d.boolean(a, s, "enabled", &c.Enabled)
	d.str(a, s, "headroom", &c.Headroom)
}
