set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/balanced-vs-even/timeline.png'
set title "balanced-vs-even: where each node's time went (n=4096, all nodes, median run)"
set ylabel 'seconds'
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.7
set xtics rotate by -30
plot 'experiments/results/balanced-vs-even/timeline.dat' using 2:xtic(1) title 'computing', '' using 3 title 'receiving or waiting for data', '' using 4 title 'idle until the slowest node finished'
