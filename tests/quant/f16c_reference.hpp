// Hardware F16C conversion used as an independent oracle for fp32_to_fp16 (compiled with -mf16c on x86-64).
#pragma once

#include <cstdint>

bool strata_test_cpu_has_f16c();
// Only call when strata_test_cpu_has_f16c() is true.
uint16_t strata_test_f16c_fp32_to_fp16(float f);
