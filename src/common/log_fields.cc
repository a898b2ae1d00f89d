#include "common/log_fields.h"

namespace ef {
namespace {
thread_local const std::initializer_list<LogField>* t_fields = nullptr;
}  // namespace

std::initializer_list<LogField> CurrentLogFields() {
  return t_fields == nullptr ? std::initializer_list<LogField>{} : *t_fields;
}

namespace log_internal {
void SetFields(const std::initializer_list<LogField>* fields) { t_fields = fields; }
}  // namespace log_internal

}  // namespace ef
