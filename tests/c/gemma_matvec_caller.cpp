// The generated header used from C++ unchanged: it must compile as C++ and link against the
// C object. All-ones inputs make every output exactly 2048.
#include "gemma_matvec.h"

#include <cstdint>
#include <cstdio>
#include <vector>

int main()
{
    const std::uint16_t one = 0x3f80;  // 1.0 in bf16
    std::vector<std::uint16_t> x(2048, one), w(std::size_t{2048} * 16384, one);
    std::vector<float> y(16384, -1.0f);
    gemma_matvec(x.data(), w.data(), y.data());
    for (float v : y) {
        if (v != 2048.0f) {
            std::fprintf(stderr, "expected 2048, got %g\n", static_cast<double>(v));
            return 1;
        }
    }
    std::puts("gemma_matvec called from C++: all outputs are 2048");
    return 0;
}
