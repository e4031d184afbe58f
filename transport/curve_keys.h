// CurveZMQ keys: generation, key files, and the allow-list of agent public keys.
//
// Key files hold Z85 text (40 characters for a 32-byte key). `NAME.secret` holds the secret key
// (mode 0600; the public key is derived from it), `NAME.pub` the public key. An allow-list file
// holds one public key per line; blank lines and lines starting with '#' that are not keys
// ('#' is a Z85 character) are ignored, so `cat *.pub` makes one.
//
// Thread-safety: free functions, no shared state.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace servesweep {

struct CurveKeypair {
  std::string public_z85;  // 40 characters
  std::string secret_z85;  // 40 characters
};

// A fresh keypair from libzmq's CSPRNG.
Status GenerateCurveKeypair(CurveKeypair* out);

// Writes DIR/NAME.secret (0600, created exclusively: an existing key is never overwritten) and
// DIR/NAME.pub; creates DIR (0700) if needed.
Status WriteCurveKeypair(const std::string& dir, const std::string& name,
                         const CurveKeypair& keypair);

// Reads a secret key file and derives its public key. Refuses a secret file that others may read.
Status ReadCurveSecretKey(const std::string& path, CurveKeypair* out);

// Reads a public key file (one key).
Status ReadCurvePublicKey(const std::string& path, std::string* public_z85);

// Reads an allow-list file of public keys (at least one).
Status ReadCurveAllowList(const std::string& path, std::vector<std::string>* public_z85);

// Whether `text` is a well-formed 40-character Z85 key.
bool IsCurveKeyZ85(const std::string& text);

}  // namespace servesweep
