package fleetlock

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// ZincatiAppID is the application ID Zincati derives its FleetLock identity with
// (src/identity/mod.rs): its id is sd_id128_get_machine_app_specific(ZincatiAppID),
// the same as `systemd-id128 machine-id -a de35106b6ec24688b63afddaa156679b`.
const ZincatiAppID = "de35106b6ec24688b63afddaa156679b"

// AppSpecificID computes systemd's app-specific machine ID
// (sd_id128_get_machine_app_specific): HMAC-SHA256 keyed with the 16 bytes of the
// machine ID over the 16 bytes of the app ID, the first 16 bytes kept, made a
// version 4, variant 1 UUID, as 32 lowercase hex digits.
func AppSpecificID(machineID, appID string) (string, error) {
	key, err := parseID128(machineID)
	if err != nil {
		return "", fmt.Errorf("machine ID: %w", err)
	}
	app, err := parseID128(appID)
	if err != nil {
		return "", fmt.Errorf("app ID: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write(app)
	b := m.Sum(nil)[:16]
	b[6] = (b[6] & 0x0F) | 0x40
	b[8] = (b[8] & 0x3F) | 0x80
	return hex.EncodeToString(b), nil
}

// ZincatiID is the FleetLock id Zincati sends from a machine with this machine ID.
func ZincatiID(machineID string) (string, error) { return AppSpecificID(machineID, ZincatiAppID) }

// MachineFleetLockID reads a machine-id file (such as /etc/machine-id) and returns
// the Zincati id of the machine. A missing file is no id and no error.
func MachineFleetLockID(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	id, err := ZincatiID(string(b))
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return id, nil
}

// parseID128 parses a 128-bit ID written as 32 hex digits (machine-id(5)), or as a
// UUID with dashes; surrounding white space is ignored.
func parseID128(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' {
		s = strings.ReplaceAll(s, "-", "")
	}
	if len(s) != 32 {
		return nil, fmt.Errorf("want 32 hex digits, got %d characters", len(s))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, errors.New("want 32 hex digits")
	}
	return b, nil
}
