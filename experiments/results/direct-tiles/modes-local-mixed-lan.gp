set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/direct-tiles/modes-local-mixed-lan.png'
set title 'Makespan per benchmark and mode on local-mixed-lan (median, min..max)'
set ylabel 'seconds'
set yrange [0:*]
set datafile missing '?'
set style data histograms
set style histogram errorbars gap 1 lw 1
set style fill solid 0.6 border -1
set boxwidth 0.9
plot 'experiments/results/direct-tiles/modes-local-mixed-lan.dat' using 2:3:4:xtic(1) lc rgb '#4472c4' title 'scheduled', 'experiments/results/direct-tiles/modes-local-mixed-lan.dat' using 5:6:7 lc rgb '#ffc000' title 'direct', 'experiments/results/direct-tiles/modes-local-mixed-lan.dat' using 8:9:10 lc rgb '#70ad47' title 'via-coordinator'
