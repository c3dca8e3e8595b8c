#include "core/status.h"

const char *mcoll__status_str(mcoll_status status) {
  switch (status) {
#define MCOLL_STATUS_CASE(name, text) \
  case MCOLL_##name: return text;
    MCOLL_STATUSES(MCOLL_STATUS_CASE)
#undef MCOLL_STATUS_CASE
  }
  return "unknown status";
}
