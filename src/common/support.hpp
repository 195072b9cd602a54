// A registry's answer to "can this shape run here?", with the reason when it cannot (one
// sentence the CLI prints as it is).
#pragma once

#include <string>

namespace km {

struct Support {
  bool ok = true;
  std::string reason;
};

}  // namespace km
