// symwork in C++: namespaces, a class template, methods, a lambda and standard-library
// algorithms, so that symbolization meets mangled names and inlined library code.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace symwork {

template <typename T>
class Matrix {
 public:
  explicit Matrix(std::size_t n) : n_(n), cells_(n * n) {}
  T& at(std::size_t row, std::size_t column) { return cells_[row * n_ + column]; }
  const T& at(std::size_t row, std::size_t column) const { return cells_[row * n_ + column]; }
  std::size_t size() const { return n_; }

  __attribute__((noinline)) Matrix multiply(const Matrix& other) const {
    Matrix out(n_);
    for (std::size_t i = 0; i < n_; i++)
      for (std::size_t k = 0; k < n_; k++) {
        const T left = at(i, k);
        for (std::size_t j = 0; j < n_; j++) out.at(i, j) += left * other.at(k, j);
      }
    return out;
  }

 private:
  std::size_t n_;
  std::vector<T> cells_;
};

namespace text {

__attribute__((noinline)) std::map<std::string, int> count_words(const std::vector<std::string>& words) {
  std::map<std::string, int> counts;
  for (const auto& w : words) counts[w]++;
  return counts;
}

}  // namespace text

__attribute__((noinline)) std::uint64_t sort_and_sum(std::vector<std::uint64_t> values) {
  std::sort(values.begin(), values.end(), [](std::uint64_t a, std::uint64_t b) { return (a % 1000) < (b % 1000); });
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < values.size(); i += 7) sum += values[i];
  return sum;
}

}  // namespace symwork

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 20;
  symwork::Matrix<double> a(96), b(96);
  for (std::size_t i = 0; i < a.size(); i++)
    for (std::size_t j = 0; j < a.size(); j++) a.at(i, j) = b.at(j, i) = double(i + 2 * j) / 97.0;
  std::vector<std::string> words;
  for (int i = 0; i < 20000; i++) words.push_back("w" + std::to_string((i * 7919) % 1500));
  std::vector<std::uint64_t> values(60000);
  for (std::size_t i = 0; i < values.size(); i++) values[i] = i * 0x9e3779b97f4a7c15ull;
  double trace = 0;
  std::uint64_t sum = 0;
  std::size_t distinct = 0;
  for (int r = 0; r < rounds; r++) {
    auto c = a.multiply(b);
    trace += c.at(r % 96, r % 96);
    distinct += symwork::text::count_words(words).size();
    sum += symwork::sort_and_sum(values);
  }
  std::printf("%.3f %zu %llu\n", trace, distinct, static_cast<unsigned long long>(sum));
  return 0;
}
