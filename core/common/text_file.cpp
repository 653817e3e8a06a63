#include "common/text_file.hpp"

#include "common/error.hpp"

#include <fstream>
#include <sstream>

namespace strata {

std::string read_text_file(const std::filesystem::path &p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) fail("{}: cannot open it", p.string());
    std::ostringstream s;
    s << in.rdbuf();
    if (in.bad()) fail("{}: reading it failed", p.string());
    return s.str();
}

} // namespace strata
